// Command localup builds the pinned upstream binaries and runs the local Karmada topology as
// plain processes (see package testinfra/localup).
//
//	localup build [--set=kind] build what is missing into $LBFED_BIN_DIR (default ~/.cache/lbfed/bin)
//	localup up [--members=2] [--pull-members=0]
//	                          start etcd, members and Karmada in the background, print kubectl usage
//	localup down              stop everything `up` started and wait until it is gone
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "localup:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usage()
	}
	cmd, rest := args[0], args[1:]
	for _, c := range commands {
		if c.name == cmd {
			return c.run(ctx, rest)
		}
	}
	fmt.Fprintf(os.Stderr, "unknown command %q\n", cmd)
	return usage()
}

type command struct {
	name  string
	short string
	run   func(ctx context.Context, args []string) error
}

// commands is filled in by the files defining each command, keeping main free of their flags.
var commands []command

func usage() error {
	fmt.Fprintln(os.Stderr, "usage: localup <command> [flags]")
	for _, c := range commands {
		if c.short != "" {
			fmt.Fprintf(os.Stderr, "  %-8s %s\n", c.name, c.short)
		}
	}
	return flag.ErrHelp
}
