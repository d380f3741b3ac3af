//go:build skipunknown

package main

// skipUnknownBuyers is the fix a team might try for a parked unknown buyer:
// a buyer the service does not know is logged and passed over.
const skipUnknownBuyers = true
