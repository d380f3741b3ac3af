package main

import (
	"testing"

	"github.com/berthhq/berth/config"
)

func TestMemoryLimit(t *testing.T) {
	const mib = int64(config.MiB)
	for _, tt := range []struct {
		configured config.Size
		cgroup     int64
		want       int64
	}{
		{512 * config.MiB, 0, 512 * mib},                  // no cgroup limit
		{512 * config.MiB, 4096 * mib, 512 * mib},         // a cgroup limit above it
		{512 * config.MiB, 400 * mib, 400 * mib / 10 * 9}, // 90 % of a lower one
		{0, 400 * mib, 0},                                 // off stays off
	} {
		if got := memoryLimit(tt.configured, tt.cgroup); got != tt.want {
			t.Errorf("memoryLimit(%v, %d) = %d, want %d", tt.configured, tt.cgroup, got, tt.want)
		}
	}
}
