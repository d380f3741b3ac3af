//go:build !replayv2

package main

// authorizedPath is what authorizedCall appends to its service-url; the
// build tag replayv2 makes the variant the replay tests run against its
// capsules, whose request the recording has no answer for.
const authorizedPath = ""
