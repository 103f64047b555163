package main

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/lbfed/lbfed/lbcf/api/crd"
)

// afterCRDs starts the runnable that build makes only once karmada-apiserver serves the LBCF
// kinds. The chart's apply Job puts the CRDs there after lbfed-controller is installed (and
// registers the interpreter and admission once it is ready): a controller that exited without
// them would crash-loop through the install, so it waits, serving the interpreter meanwhile.
type afterCRDs struct {
	cfg   *rest.Config
	log   logr.Logger
	every time.Duration
	build func() (runnable, error)
}

func (a *afterCRDs) Start(ctx context.Context) error {
	if err := crd.WaitServed(ctx, a.cfg, a.log, a.every); err != nil {
		return err
	}
	r, err := a.build()
	if err != nil {
		return err
	}
	return r.Start(ctx)
}
