//! The binary codec of ABI v1 (wasm/abi/ABI.md, "Encoding"): unsigned LEB128
//! integers, zig-zag signed ones, length-prefixed strings and bytes, counted
//! lists. The same bytes as the Go codec in wasm/abi; a test checks both
//! against the golden vectors in wasm/abi/testdata.

use std::fmt;

/// Bounds any single length-prefixed field (16 MiB), as the Go codec does.
pub const MAX_FIELD_LEN: u64 = 16 << 20;

/// Why a message did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "abi: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

fn truncated() -> DecodeError {
    DecodeError("message truncated".into())
}

/// Appends fields to a byte vector.
#[derive(Debug, Default, Clone)]
pub struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    /// An encoder that appends to buf after clearing it (so a buffer is reused).
    pub fn new(mut buf: Vec<u8>) -> Encoder {
        buf.clear();
        Encoder { buf }
    }

    /// The encoded message.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    /// Appends an unsigned LEB128 varint.
    pub fn uint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// Appends a zig-zag signed varint.
    pub fn int(&mut self, v: i64) {
        self.uint(((v << 1) ^ (v >> 63)) as u64);
    }

    /// Appends 0 or 1.
    pub fn bool(&mut self, v: bool) {
        self.uint(v as u64);
    }

    /// Appends a length-prefixed string.
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    /// Appends a length-prefixed byte field.
    pub fn bytes(&mut self, b: &[u8]) {
        self.uint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    /// Appends a count, then each string.
    pub fn strs<S: AsRef<str>>(&mut self, ss: &[S]) {
        self.uint(ss.len() as u64);
        for s in ss {
            self.str(s.as_ref());
        }
    }
}

/// Reads fields an Encoder wrote. Every read returns an error once the input
/// is short; `done` refuses bytes left over.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    off: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder over b.
    pub fn new(buf: &'a [u8]) -> Decoder<'a> {
        Decoder { buf, off: 0 }
    }

    /// Ok if every byte was read.
    pub fn done(&self) -> Result<(), DecodeError> {
        match self.buf.len() - self.off {
            0 => Ok(()),
            n => Err(DecodeError(format!("{} trailing bytes", n))),
        }
    }

    /// Reads an unsigned varint (at most 10 bytes, as Go's binary.Uvarint).
    pub fn uint(&mut self) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = *self.buf.get(self.off + i).ok_or_else(truncated)?;
            if i == 9 && b > 1 {
                return Err(DecodeError("varint overflows 64 bits".into()));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.off += i + 1;
                return Ok(v);
            }
        }
        Err(DecodeError("varint overflows 64 bits".into()))
    }

    /// Reads a zig-zag signed varint.
    pub fn int(&mut self) -> Result<i64, DecodeError> {
        let u = self.uint()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    /// Reads an unsigned varint that must fit 32 bits.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let v = self.uint()?;
        u32::try_from(v).map_err(|_| DecodeError(format!("value {} overflows 32 bits", v)))
    }

    /// Reads an unsigned varint that must fit 8 bits.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let v = self.uint()?;
        u8::try_from(v).map_err(|_| DecodeError(format!("value {} overflows 8 bits", v)))
    }

    /// Reads a boolean: 0 or 1.
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.uint()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError("bad boolean".into())),
        }
    }

    /// Reads a length-prefixed byte field, borrowed from the input.
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.uint()?;
        if n > MAX_FIELD_LEN || n > (self.buf.len() - self.off) as u64 {
            return Err(truncated());
        }
        let b = &self.buf[self.off..self.off + n as usize];
        self.off += n as usize;
        Ok(b)
    }

    /// Reads a length-prefixed string. Bytes that are not UTF-8 are replaced
    /// (U+FFFD), as a Rust string must be UTF-8; the host sends UTF-8.
    pub fn string(&mut self) -> Result<String, DecodeError> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }

    /// Reads a collection count; each element takes at least one byte, so a
    /// count larger than the bytes left is corrupt.
    pub fn count(&mut self) -> Result<usize, DecodeError> {
        let n = self.uint()?;
        if n > (self.buf.len() - self.off) as u64 {
            return Err(truncated());
        }
        Ok(n as usize)
    }

    /// Reads a count, then that many strings.
    pub fn strings(&mut self) -> Result<Vec<String>, DecodeError> {
        let n = self.count()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.string()?);
        }
        Ok(out)
    }
}

/// Packs a pointer (high 32 bits) and a length (low 32 bits) into the i64 that
/// berth_describe and berth_handle return.
pub fn pack(ptr: u32, len: u32) -> u64 {
    (u64::from(ptr) << 32) | u64::from(len)
}

/// The inverse of pack.
pub fn unpack(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}
