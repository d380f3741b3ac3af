//go:build !skipunknown

package main

// skipUnknownBuyers is false in the sample as the README tells it: a buyer
// the service does not know parks the order. The build tag skipunknown
// makes the "fix" the replay tests try with `berth parked replay --module`.
const skipUnknownBuyers = false
