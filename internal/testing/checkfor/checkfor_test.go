package checkfor_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
)

// TestNilReturnsOnceCheckSucceeds: the wait ends at the first nil, after
// the errors before it.
func TestNilReturnsOnceCheckSucceeds(t *testing.T) {
	calls := 0
	checkfor.Nil(t, 10*time.Second, time.Millisecond, func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("%d calls", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Errorf("checked %d times, want 3", calls)
	}
}

// timeoutChild names, in a child test process, the wait that must time out
// (see TestTimeoutSaysWhatWasLastSeen).
const timeoutChild = "CHECKFOR_TIMEOUT_CHILD"

// TestTimeoutSaysWhatWasLastSeen: a wait that times out fails its test —
// it does not hang — and the failure says what the check last returned. The test runs itself again in a child
// process, where the wait fails a real testing.T.
func TestTimeoutSaysWhatWasLastSeen(t *testing.T) {
	switch os.Getenv(timeoutChild) {
	case "nil":
		calls := 0
		checkfor.Nil(t, 50*time.Millisecond, time.Millisecond, func() error {
			calls++
			return fmt.Errorf("seen %d: %w", calls, errors.New("still 2 of 3 hosts"))
		})
		return
	}
	for _, tc := range []struct{ kind, want string }{
		{"nil", "timed out after 50ms: seen "},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestTimeoutSaysWhatWasLastSeen$", "-test.v")
			cmd.Env = append(os.Environ(), timeoutChild+"="+tc.kind)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the timed-out wait did not fail its test (%v):\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
			if tc.kind == "nil" && !strings.Contains(string(out), "still 2 of 3 hosts") {
				t.Errorf("output lacks the last error:\n%s", out)
			}
		})
	}
}
