package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/lbfed/lbfed/testinfra/localup/binaries"
)

func init() {
	commands = append(commands, command{
		name:  "build",
		short: "build the pinned etcd, Kubernetes, Karmada and kwok binaries that are missing (--set=kind: the kind node's)",
		run:   runBuild,
	}, command{
		name:  "bin",
		short: "print the path of a built binary, e.g. `localup bin kubectl` (--set=kind for the kind set's)",
		run:   runBin,
	})
}

func runBin(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("bin", flag.ContinueOnError)
	setName := fs.String("set", binaries.LocalupSet, "binary set: "+binaries.LocalupSet+" or "+binaries.KindSet)
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) != 1 {
		return fmt.Errorf("usage: localup bin [--set=kind] <%s|%s|…>", binaries.Kubectl, binaries.Karmadactl)
	}
	set, err := binaries.LocateSet("", *setName)
	if err != nil {
		return err
	}
	path := set.Path(args[0])
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no binary %q: %w", args[0], err)
	}
	fmt.Println(path)
	return nil
}

func runBuild(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	binDir := fs.String("bin-dir", "", "binary cache root (default $"+binaries.EnvBinDir+" or ~/.cache/lbfed/bin)")
	force := fs.Bool("force", false, "rebuild groups that are already built")
	setName := fs.String("set", binaries.LocalupSet, "binary set: "+binaries.LocalupSet+" or "+binaries.KindSet)
	if err := fs.Parse(args); err != nil {
		return err
	}
	start := time.Now()
	results, err := binaries.Build(ctx, binaries.BuildOptions{BinDir: *binDir, Force: *force, Progress: os.Stderr, Set: *setName})
	for _, r := range results {
		switch {
		case r.Group == "":
		case r.Cached:
			fmt.Printf("%-13s cached   %s\n", r.Group, r.Dir)
		default:
			fmt.Printf("%-13s %6.0fs  %s\n", r.Group, r.Duration.Seconds(), r.Dir)
		}
	}
	if err != nil {
		return err
	}
	fmt.Printf("binaries ready in %.1fs\n", time.Since(start).Seconds())
	return nil
}
