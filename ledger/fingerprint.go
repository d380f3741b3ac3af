package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"unicode/utf8"
)

// A failure group is the parked records of a subscription that failed for
// one cause: the same module (whatever its version), the same class chain
// and the same message once its variable parts are masked. Its fingerprint
// names it; the ledger computes it from the record when it indexes it, so
// whoever parks a record need not know about groups.

// MaxMaskedMessage bounds the masked message a fingerprint is taken of,
// in bytes: past it, a long message (a panic's stack, a response body)
// differs in what does not name the cause.
const MaxMaskedMessage = 256

// The masking rules, in the order they apply; each replaces what it
// matches with "{}". Earlier rules take whole spans that later ones would
// cut into parts (a quoted value holding digits, a UUID's hex groups).
// A rule runs only on a message holding what it needs (a brace, a quote,
// a digit), so that a message with nothing to mask costs a few scans:
// every park computes its fingerprint.
var (
	// A variable part the module named itself: a span in braces.
	maskBraces = regexp.MustCompile(`\{[^{}]*\}`)
	// Quoted values: "…" (with escapes), '…', `…`.
	maskQuoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'[^'\n]*'|` + "`[^`]*`")
)

// maskDigits are the rules of the parts that hold a digit.
var maskDigits = []*regexp.Regexp{
	// UUIDs.
	regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`),
	// Timestamps: a date, with a time and zone when there are.
	regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?`),
	// Hex, 0x-prefixed. (A run of hex digits holds a digit, so the next
	// rule takes it; one of letters a to f alone is a word.)
	regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b`),
	// Numbers and ids: any word with a digit in it (42, 1.5, b-4821,
	// ord_17, v3, 300ms, 10.0.0.3).
	regexp.MustCompile(`[\p{L}_-]*\d[\p{L}\d_.-]*`),
}

// maskRuns joins masks next to one another, or apart by one separator
// (an address's dots and colons, a list's commas), into one: "ids 1, 2"
// and "ids 1, 2, 3" are one cause.
var maskRuns = regexp.MustCompile(`\{\}(?:\s*[.,:;/@#-]?\s*\{\})+`)

// MaskMessage returns message with its variable parts replaced by "{}":
// spans in braces (a module's own variable parts, see wasm/abi/ABI.md),
// quoted values, UUIDs, timestamps, 0x hex, and any word holding a digit
// (numbers and ids); masks next to one another become one; white space
// runs become one space; the result is cut to MaxMaskedMessage bytes. It
// is pure: the same message always masks the same.
//
//	the notification service does not know buyer b-4821
//	-> the notification service does not know buyer {}
func MaskMessage(message string) string {
	s := message
	if strings.IndexByte(s, '{') >= 0 {
		s = maskBraces.ReplaceAllLiteralString(s, "{}")
	}
	if strings.ContainsAny(s, "\"'`") {
		s = maskQuoted.ReplaceAllLiteralString(s, "{}")
	}
	if strings.ContainsAny(s, "0123456789") {
		for _, re := range maskDigits {
			s = re.ReplaceAllLiteralString(s, "{}")
		}
	}
	if strings.Contains(s, "{}") {
		s = maskRuns.ReplaceAllLiteralString(s, "{}")
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > MaxMaskedMessage {
		cut := MaxMaskedMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// ModuleName is a module version's module: "shipment-notifier v3" is
// "shipment-notifier" (ErrorInfo.Module).
func ModuleName(moduleVersion string) string {
	if i := strings.LastIndex(moduleVersion, " v"); i >= 0 {
		v := moduleVersion[i+2:]
		if v != "" && strings.Trim(v, "0123456789") == "" {
			return moduleVersion[:i]
		}
	}
	return moduleVersion
}

// Fingerprint returns the failure group of a record: 16 hex digits of
// the SHA-256 of its subscription, its module (not the version: a cause
// that outlives a deploy is one group, whose versions the group lists),
// its class chain and its masked message.
func Fingerprint(r *Record) string {
	return fingerprint(r.Subscription, ModuleName(r.Error.Module), r.Error.Classes, MaskMessage(r.Error.Message))
}

func fingerprint(sub, module string, classes []string, masked string) string {
	h := sha256.New()
	b := appendLP(nil, sub)
	b = appendLP(b, module)
	for _, c := range classes {
		b = appendLP(b, c)
	}
	b = append(b, 0)
	b = appendLP(b, masked)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:8])
}
