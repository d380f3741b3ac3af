package main

import (
	"github.com/berthhq/berth/internal/buildinfo"
	"github.com/spf13/cobra"
)

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and VCS revision this binary was built from",
		Long: `Print the module version, the VCS revision (with "modified" when the working tree had
changes) and the Go version this binary was built with, as the toolchain recorded them.
A running host shows the same in its berth_build_info metric.`,
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return printVersion(a, buildinfo.Read())
		},
	}
}

func printVersion(a *app, info buildinfo.Info) error {
	kv := newKeyValues(a.stdout)
	kv.add("version", "%s", info.Version)
	rev := info.Revision
	if info.Modified {
		rev += " (modified)"
	}
	kv.add("revision", "%s", rev)
	if info.Time != "" {
		kv.add("committed", "%s", info.Time)
	}
	kv.add("go", "%s", info.GoVersion)
	return kv.flush()
}
