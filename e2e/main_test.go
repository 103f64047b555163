//go:build e2e

// Package e2e holds end-to-end tests against the full local topology: a Karmada control plane
// and two member clusters with kwok nodes, started once for the package by testenv (see
// e2e/localup). Run with `make test-e2e` (go test -tags e2e ./e2e/).
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbfed/lbfed/e2e/localup"
	"github.com/lbfed/lbfed/e2e/localup/testenv"
	"github.com/lbfed/lbfed/lbcf/api/crd"
)

// The test binary doubles as a process started into the topology by an AfterReady hook: a
// resource-interpreter webhook, registered with Karmada by URL, standing in for lbfed's own.
const (
	roleEnv        = "LBFED_E2E_ROLE"
	interpreterEnv = "interpreter"
)

// interpreterAddr is where the helper webhook listens; chosen in TestMain.
var interpreterAddr string

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == interpreterEnv {
		serveInterpreter()
		return
	}
	crds, err := crd.CRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lbfed CRDs:", err)
		os.Exit(1)
	}
	testenv.MainTopology(m, localup.TopologyOptions{
		CRDs:       crds,
		AfterReady: []func(context.Context, *localup.Topology) error{startInterpreter},
	})
}

// startInterpreter is the AfterReady hook: it starts the helper webhook with the run's serving
// certificate and waits until it answers.
func startInterpreter(ctx context.Context, t *localup.Topology) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	interpreterAddr = fmt.Sprintf("127.0.0.1:%d", port)
	p, err := t.StartProcess(localup.ProcessSpec{
		Name: "e2e-interpreter",
		Path: os.Args[0],
		Env: []string{
			roleEnv + "=" + interpreterEnv,
			"INTERPRETER_ADDR=" + interpreterAddr,
			"INTERPRETER_CERT=" + t.PKI().ServingCert,
			"INTERPRETER_KEY=" + t.PKI().ServingKey,
		},
	})
	if err != nil {
		return err
	}
	client, err := caClient(t.PKI().CAPEM())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get("https://" + interpreterAddr + "/count")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if exited, _ := p.Exited(); exited {
			return fmt.Errorf("interpreter exited: %s", p.LogTail(20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("interpreter not answering: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// interpreterContext is the part of Karmada's ResourceInterpreterContext the helper needs.
type interpreterContext struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Request    map[string]any `json:"request,omitempty"`
	Response   map[string]any `json:"response,omitempty"`
}

// serveInterpreter answers InterpretHealth with healthy=true and counts the calls on /count.
func serveInterpreter() {
	var calls atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/interpreter", func(w http.ResponseWriter, r *http.Request) {
		var in interpreterContext
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request == nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		resp := map[string]any{"uid": in.Request["uid"], "successful": true}
		if in.Request["operation"] == "InterpretHealth" {
			resp["healthy"] = true
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(interpreterContext{APIVersion: in.APIVersion, Kind: in.Kind, Response: resp})
	})
	mux.HandleFunc("/count", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(calls.Load())
	})
	srv := &http.Server{Addr: os.Getenv("INTERPRETER_ADDR"), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	err := srv.ListenAndServeTLS(os.Getenv("INTERPRETER_CERT"), os.Getenv("INTERPRETER_KEY"))
	fmt.Fprintln(os.Stderr, "interpreter:", err)
	os.Exit(1)
}
