//go:build unix

package diskspace

import "golang.org/x/sys/unix"

// statfs returns the bytes of dir's filesystem available to this
// (unprivileged) process: blocks free to non-root users, as df's "Avail",
// so that the reserve root keeps for itself is not counted as ours.
func statfs(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // field types differ by OS
}
