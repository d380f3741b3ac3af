package registry

import "log/slog"

// logDeployed is the one info line of a module taking effect on this
// host: how (uploaded, rolled back, loaded from the store at start) and
// what runs now, so an on-call can match a change of behaviour to a
// deploy.
func logDeployed(l *slog.Logger, how string, d *deployed) {
	in := d.info()
	l.Info("module "+how, "module", in.Name, "version", in.Version, "sha256", in.SHA256, "size", in.Size,
		"processor", in.Processor, "kind", in.Kind, "subscriptions", in.Subscriptions, "deadlineGuard", in.DeadlineGuard)
}
