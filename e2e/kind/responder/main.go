// Command responder is the demo workload of the offline kind topology (hack/kind): an HTTP server
// that answers every request with who answered, in the form testinfra/localup/podresponder gives kwok's
// pods in the local topology, so a test reads the same line from either:
//
//	{"cluster":"m1","namespace":"demo","pod":"web-7d4b9-x2x8q","ip":"10.12.0.7","port":8080,"path":"/"}
//
// The pod's name, namespace and node come from the downward API (POD_NAME, POD_NAMESPACE,
// NODE_NAME); the cluster from CLUSTER, else from the kind node's name
// (lbfed-<cluster>-control-plane or lbfed-<cluster>-worker…), so one template serves every member
// of a Karmada propagation. The address and port are the connection's local ones. SIGTERM stops
// it after in-flight requests end (use a preStop sleep action to keep it serving while a load
// balancer drains it).
//
// With -get URL (repeatable) it is the client instead, for a pod with no shell or curl: it
// prints each answer's body and fails when one does not come with 200 within -timeout.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// answer is one response: the podresponder's fields.
type answer struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	IP        string `json:"ip"`
	Port      int    `json:"port"`
	Path      string `json:"path"`
}

var kindNode = regexp.MustCompile(`^(?:lbfed-)?(.+)-(?:control-plane|worker[0-9]*)$`)

// clusterName is CLUSTER, else the cluster part of a kind node name, else the node name.
func clusterName(cluster, node string) string {
	if cluster != "" {
		return cluster
	}
	if m := kindNode.FindStringSubmatch(node); m != nil {
		return m[1]
	}
	return node
}

func handler(cluster, namespace, pod string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answer{Cluster: cluster, Namespace: namespace, Pod: pod, Path: r.URL.Path}
		if addr, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
			a.IP, a.Port = addr.IP.String(), addr.Port
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	})
}

// urls is a repeatable flag.
type urls []string

func (u *urls) String() string     { return strings.Join(*u, ",") }
func (u *urls) Set(v string) error { *u = append(*u, v); return nil }

// get fetches every URL and writes the bodies to out, one line each.
func get(out io.Writer, targets []string, timeout time.Duration) error {
	client := &http.Client{Timeout: timeout}
	for _, u := range targets {
		resp, err := client.Get(u)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", u, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", u, resp.Status)
		}
		fmt.Fprintf(out, "%s %s\n", u, strings.TrimSpace(string(body)))
	}
	return nil
}

func main() {
	listen := flag.String("listen", ":8080", "address to serve HTTP on")
	var targets urls
	flag.Var(&targets, "get", "fetch this URL, print the answer and exit instead of serving (repeatable)")
	timeout := flag.Duration("timeout", 5*time.Second, "with -get: time allowed for each request")
	flag.Parse()
	if len(targets) > 0 {
		if err := get(os.Stdout, targets, *timeout); err != nil {
			log.Fatal(err)
		}
		return
	}
	cluster := clusterName(os.Getenv("CLUSTER"), os.Getenv("NODE_NAME"))
	srv := &http.Server{
		Addr:              *listen,
		Handler:           handler(cluster, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("responder for cluster %q serving on %s", cluster, *listen)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
