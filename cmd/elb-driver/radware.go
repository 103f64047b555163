package main

import (
	"context"
	"flag"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/elb/radware"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// radwareFlags are the Radware backend's flags: the Alteon pair (radware.Flags) and the owner mark.
type radwareFlags struct {
	alteon radware.Flags
	owner  string
}

var radwareOpts radwareFlags

func init() {
	backends["radware"] = backend{
		register: radwareOpts.register,
		new:      radwareOpts.newDriver,
	}
}

func (f *radwareFlags) register(fs *flag.FlagSet) {
	f.alteon.Register(fs)
	fs.StringVar(&f.owner, "radware-owner", "lbfed", "owner mark (Name/Vname) of the Alteon objects this driver creates, followed by /<LoadBalancer UID>; objects with another mark are never touched")
}

func (f *radwareFlags) newDriver(ctx context.Context, log logr.Logger, reg prometheus.Registerer) (driver.Driver, error) {
	fe, err := f.alteon.Frontend(log, reg)
	if err != nil {
		return nil, err
	}
	go func() { _ = fe.Run(ctx) }() // finishes owed saves and syncs
	return radware.NewDriver(radware.DriverOptions{Frontend: fe, Owner: f.owner, Logger: log})
}
