//go:build e2e

// Package e2e holds end-to-end tests against the full local topology: a Karmada control plane
// and two member clusters with kwok nodes, started once for the package by testenv (see
// testinfra/localup). Run with `make test-e2e` (go test -tags e2e ./e2e/).
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lbfed/lbfed/lbcf/api/crd"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
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
		CRDs: crds,
		// m1, m2 in Push mode and m3 in Pull mode (karmada-agent).
		PullMembers: 1,
		AfterReady:  []func(context.Context, *localup.Topology) error{startInterpreter},
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

// interpreterCall is one kind of call the helper webhook received: which program called it
// (the command of the process owning the connection's other end), for an object of which
// member (from Karmada's work.karmada.io/namespace annotation on the observed object,
// karmada-es-<member>; "" for a template), and the operation.
type interpreterCall struct {
	Caller    string `json:"caller"`
	Cluster   string `json:"cluster"`
	Operation string `json:"operation"`
}

// serveInterpreter answers InterpretHealth with healthy=true, counts the calls on /count and
// tells who made them on /callers.
func serveInterpreter() {
	var calls atomic.Int64
	var mu sync.Mutex
	callers := map[interpreterCall]int{}
	mux := http.NewServeMux()
	mux.HandleFunc("/interpreter", func(w http.ResponseWriter, r *http.Request) {
		var in interpreterContext
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request == nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		call := interpreterCall{Caller: peerCommand(r.RemoteAddr)}
		call.Operation, _ = in.Request["operation"].(string)
		if obj, ok := in.Request["object"].(map[string]any); ok {
			u := unstructured.Unstructured{Object: obj}
			call.Cluster = strings.TrimPrefix(u.GetAnnotations()["work.karmada.io/namespace"], "karmada-es-")
		}
		mu.Lock()
		callers[call]++
		mu.Unlock()
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
	mux.HandleFunc("/callers", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var out []interpreterCall
		for c := range callers {
			out = append(out, c)
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	srv := &http.Server{Addr: os.Getenv("INTERPRETER_ADDR"), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	err := srv.ListenAndServeTLS(os.Getenv("INTERPRETER_CERT"), os.Getenv("INTERPRETER_KEY"))
	fmt.Fprintln(os.Stderr, "interpreter:", err)
	os.Exit(1)
}

// peerCommand names the local program at the other end of a loopback TCP connection: the
// socket whose local address is remoteAddr (in /proc/net/tcp), then the process holding it
// open (a /proc/<pid>/fd link to socket:[inode]), then that process's command. Karmada's
// interpreter clients all send the same User-Agent, so this is how the helper tells
// karmada-agent from karmada-controller-manager. "" when not found.
func peerCommand(remoteAddr string) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil || !ap.Addr().Unmap().Is4() {
		return ""
	}
	ip := ap.Addr().Unmap().As4()
	// /proc/net/tcp prints the address as the host-order 32-bit word, in hex; /proc/net/tcp6 holds
	// the peer's socket instead when the peer opened an IPv6 one (the address then IPv4-mapped).
	v4 := fmt.Sprintf("%02X%02X%02X%02X", ip[3], ip[2], ip[1], ip[0])
	inode := ""
	for _, table := range []struct{ path, want string }{
		{"/proc/net/tcp", fmt.Sprintf("%s:%04X", v4, ap.Port())},
		{"/proc/net/tcp6", fmt.Sprintf("0000000000000000FFFF0000%s:%04X", v4, ap.Port())},
	} {
		b, err := os.ReadFile(table.path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 9 && f[1] == table.want {
				inode = f[9]
				break
			}
		}
		if inode != "" {
			break
		}
	}
	if inode == "" {
		return ""
	}
	target := "socket:[" + inode + "]"
	// Karmada's processes first: a scan of every process's descriptors on a loaded machine
	// (other suites' API servers beside this one) outlasted the webhook's timeout, the caller
	// closed the connection, and its socket was gone by the time the scan reached it.
	all, _ := filepath.Glob("/proc/[0-9]*")
	var karmada, others []string
	for _, proc := range all {
		if comm, err := os.ReadFile(filepath.Join(proc, "comm")); err == nil && strings.HasPrefix(string(comm), "karmada") {
			karmada = append(karmada, proc)
		} else {
			others = append(others, proc)
		}
	}
	for _, proc := range append(karmada, others...) {
		fds, _ := filepath.Glob(filepath.Join(proc, "fd", "*"))
		for _, fd := range fds {
			if link, err := os.Readlink(fd); err == nil && link == target {
				cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
				if err != nil {
					return ""
				}
				argv0, _, _ := strings.Cut(string(cmdline), "\x00")
				return filepath.Base(argv0)
			}
		}
	}
	return ""
}
