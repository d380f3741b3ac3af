// Package tests holds Berth's end-to-end tests: they build the host binary
// (`berth`) and the sample modules once, start the binary on temporary data
// directories and drive it over HTTP and its CLI, with a fake notification
// service standing in for the ShipmentNotifier's remote system. They own
// what no one package can check: the import floors
// (TestEveryImportPointsDown), crashes and power cuts on a FUSE mount, full
// disks, clusters of hosts on a real NATS server, the ops console in
// headless Chromium, the metrics a live scrape gives, and Rust guests.
package tests
