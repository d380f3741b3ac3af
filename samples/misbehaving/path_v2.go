//go:build replayv2

package main

// authorizedPath: the replayv2 variant asks for another URL.
const authorizedPath = "/v2"
