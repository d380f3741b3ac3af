//go:build !unix

package diskspace

// statfs is not known on this platform: free space reads as unknown (-1)
// and the reserve is not enforced, while a removed directory still is.
func statfs(dir string) (int64, error) { return -1, nil }
