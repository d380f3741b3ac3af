package cluster

// ValidHostID reports whether id may name a host (Options.Host): letters,
// digits, '-' and '_' only. config checks cluster.host-id with it, so the
// rule has one owner.
func ValidHostID(id string) bool { return hostID.MatchString(id) }
