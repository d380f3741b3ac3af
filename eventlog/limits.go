package eventlog

// Limits every Log implementation applies.
const (
	// DefaultReadLimit is the number of commits Read and ReadAggregate return
	// when they are asked for a limit of 0 or less.
	DefaultReadLimit = 1000

	// MaxNameLen is the longest aggregate type, aggregate id, owner id or
	// event type, in bytes, that Append accepts; a longer one is ErrInvalid.
	MaxNameLen = 4096
)

// ReadLimit is the number of commits a read asked for limit returns at most:
// limit, or DefaultReadLimit when limit <= 0.
func ReadLimit(limit int) int {
	if limit <= 0 {
		return DefaultReadLimit
	}
	return limit
}
