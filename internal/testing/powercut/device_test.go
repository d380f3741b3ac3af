package powercut

import (
	"strings"
	"testing"
)

// TestAMissingDeviceIsNamed: where the FUSE device is missing, Mount fails
// the test with an error naming the device (it does not skip).
func TestAMissingDeviceIsNamed(t *testing.T) {
	err := checkDevice("/nonexistent/fuse")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/fuse is missing") {
		t.Errorf("checkDevice on a missing device: %v", err)
	}
	if err := checkDevice(fuseDevice); err != nil {
		t.Errorf("this machine: %v", err)
	}
}
