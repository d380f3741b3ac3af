//! A small JSON reader and writer, enough for event payloads, commands and
//! read-model values, so that the SDK and simple handlers need no crate
//! beyond std. Handlers that want serde may use Debian's packaged crates.

use std::fmt;

/// A JSON value. Objects keep their keys in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// Parses b, which must hold exactly one JSON value.
    pub fn parse(b: &[u8]) -> Result<Value, String> {
        Value::parse_with(b, false)
    }

    /// Parses b as parse does, but keeps each number as its text, in a
    /// Value::String: for readers of a format whose integers f64 cannot
    /// hold exactly (an attempt capsule's unix nanoseconds), which tell a
    /// number from a string by where it is.
    pub(crate) fn parse_keeping_numbers(b: &[u8]) -> Result<Value, String> {
        Value::parse_with(b, true)
    }

    fn parse_with(b: &[u8], keep_numbers: bool) -> Result<Value, String> {
        let mut p = Parser { b, i: 0, depth: 0, keep_numbers };
        p.ws();
        let v = p.value()?;
        p.ws();
        if p.i != b.len() {
            return Err(format!("unexpected {:?} at offset {}", b[p.i] as char, p.i));
        }
        Ok(v)
    }

    /// The member of an object (None for other values or a missing key).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    /// The string, if the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    /// The number, if the value is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }
    /// The number, if the value is an integer.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_f64().filter(|n| n.fract() == 0.0 && n.abs() < 9.0e15).map(|n| n as i64)
    }
    /// The elements, if the value is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
    /// An object of the members.
    pub fn object(members: Vec<(&str, Value)>) -> Value {
        Value::Object(members.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }
    /// The compact JSON text, as bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.into())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}
/// Numbers of every integer width a handler has at hand (an attempt, a
/// count) and f64.
macro_rules! from_number {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(n: $t) -> Value {
                Value::Number(n as f64)
            }
        }
    )*};
}
from_number!(i32, i64, u32, u64, f64);

impl From<&String> for Value {
    fn from(s: &String) -> Value {
        Value::String(s.clone())
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

/// Writes s as a JSON string, quotes included.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_quoted(&mut out, s, false);
    out
}

/// s as a JSON string as Go's encoding/json writes it (see push_quoted).
pub(crate) fn quote_go(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_quoted(&mut out, s, true);
    out
}

/// Appends s quoted; go: escaped byte for byte as Go's encoding/json does
/// (HTML's <, > and &, U+2028/U+2029 as \u escapes, \b and \f short), so
/// that a line the Go SDK would write is written the same.
fn push_quoted(out: &mut String, s: &str, go: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' if go => out.push_str("\\b"),
            '\u{c}' if go => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' if go => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Value {
    /// The compact JSON text as Go's encoding/json writes it (strings
    /// escaped as push_quoted says, numbers as Go formats a float64, a NaN
    /// or an infinity, which JSON cannot hold, as the string Go's
    /// fmt.Sprint gives). The log line's fields are encoded so
    /// (crate::logline), to match the Go SDK's bytes.
    pub(crate) fn to_go_json(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, true);
        out
    }

    fn write(&self, out: &mut String, go: bool) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) if go => push_go_number(out, *n),
            Value::Number(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => out.push_str(&(*n as i64).to_string()),
            Value::Number(n) => out.push_str(&n.to_string()),
            Value::String(s) => push_quoted(out, s, go),
            Value::Array(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out, go);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    push_quoted(out, k, go);
                    out.push(':');
                    v.write(out, go);
                }
                out.push('}');
            }
        }
    }
}

/// Appends n as Go's encoding/json formats a float64: the shortest digits,
/// in exponent form ("1e+21", "1e-7") below 1e-6 and from 1e21.
fn push_go_number(out: &mut String, n: f64) {
    if n.is_nan() {
        out.push_str("\"NaN\"");
    } else if n.is_infinite() {
        out.push_str(if n > 0.0 { "\"+Inf\"" } else { "\"-Inf\"" });
    } else if n == 0.0 || (1e-6..1e21).contains(&n.abs()) {
        out.push_str(&n.to_string());
    } else {
        let e = format!("{:e}", n);
        match e.split_once('e') {
            Some((m, x)) if !x.starts_with('-') => out.push_str(&format!("{}e+{}", m, x)),
            _ => out.push_str(&e),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        self.write(&mut out, false);
        f.write_str(&out)
    }
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    depth: usize,
    keep_numbers: bool,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{} at offset {}", what, self.i))
    }

    fn eat(&mut self, lit: &str) -> Result<(), String> {
        if self.b[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            Ok(())
        } else {
            self.err("bad literal")
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.depth += 1;
        if self.depth > 128 {
            return self.err("nested too deeply");
        }
        let v = match self.b.get(self.i) {
            None => return self.err("unexpected end"),
            Some(b'n') => self.eat("null").map(|_| Value::Null),
            Some(b't') => self.eat("true").map(|_| Value::Bool(true)),
            Some(b'f') => self.eat("false").map(|_| Value::Bool(false)),
            Some(b'"') => self.string().map(Value::String),
            Some(b'[') => self.array(),
            Some(b'{') => self.object(),
            Some(_) => self.number(),
        };
        self.depth -= 1;
        v
    }

    fn array(&mut self) -> Result<Value, String> {
        self.i += 1;
        let mut out = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Value::Array(out));
        }
        loop {
            self.ws();
            out.push(self.value()?);
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Array(out));
                }
                _ => return self.err("expected ',' or ']'"),
            }
        }
    }

    fn object(&mut self) -> Result<Value, String> {
        self.i += 1;
        let mut out = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Value::Object(out));
        }
        loop {
            self.ws();
            if self.b.get(self.i) != Some(&b'"') {
                return self.err("expected a key");
            }
            let k = self.string()?;
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return self.err("expected ':'");
            }
            self.i += 1;
            self.ws();
            out.push((k, self.value()?));
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Object(out));
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self.b.get(self.i..self.i + 4).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u32::from_str_radix(h, 16).ok());
        match h {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => self.err("bad \\u escape"),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            match self.b.get(self.i) {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).or_else(|_| self.err("string is not UTF-8"));
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = *self.b.get(self.i).ok_or("unterminated escape")?;
                    self.i += 1;
                    let ch = match c {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let mut u = self.hex4()?;
                            if (0xD800..0xDC00).contains(&u) && self.b[self.i..].starts_with(b"\\u") {
                                self.i += 2;
                                let lo = self.hex4()?;
                                u = 0x10000 + ((u - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF);
                            }
                            char::from_u32(u).unwrap_or('\u{FFFD}')
                        }
                        _ => return self.err("bad escape"),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                Some(&c) if c < 0x20 => return self.err("control character in string"),
                Some(&c) => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.i;
        while self.i < self.b.len() && matches!(self.b[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
            self.i += 1;
        }
        let s = std::str::from_utf8(&self.b[start..self.i]).unwrap_or("");
        match s.parse::<f64>() {
            Ok(_) if self.keep_numbers && !s.is_empty() && !s.starts_with('+') && !s.starts_with('.') => Ok(Value::String(s.to_string())),
            Ok(n) if !s.is_empty() && n.is_finite() && !s.starts_with('+') && !s.starts_with('.') => Ok(Value::Number(n)),
            _ => {
                self.i = start;
                self.err("bad value")
            }
        }
    }
}
