//go:build !linux

package sandbox

import "os"

// readMapped reads the file at path (mapfile_linux.go maps it instead).
func readMapped(path string) ([]byte, func(), error) {
	b, err := os.ReadFile(path)
	return b, func() {}, err
}
