//go:build e2e

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lbfed/lbfed/e2e/localup/testenv"
)

// The test binary doubles as the localup command (the supervisor `up` starts re-executes it).
const asCLIEnv = "LOCALUP_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLIEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCLIEnv+"=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestUpDown runs `up` and `down` as a user does and checks that down, or the supervisor being
// killed outright, leaves no process and no listening port behind.
func TestUpDown(t *testing.T) {
	testenv.SkipUnlessBuilt(t)
	dir := filepath.Join(t.TempDir(), "run")
	t.Cleanup(func() { // whatever failed, leave nothing running
		if out, err := runCLI(t, "down", "--dir="+dir); err != nil {
			t.Errorf("cleanup: %v\n%s", err, out)
		}
	})

	t.Run("up, up again, down", func(t *testing.T) {
		g := NewWithT(t)
		out, err := runCLI(t, "up", "--dir="+dir, "--members=1", "--nodes=1")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("export KUBECONFIG=" + filepath.Join(dir, "karmada.kubeconfig")))
		g.Expect(out).To(ContainSubstring("--kubeconfig=" + filepath.Join(dir, "m1.kubeconfig")))

		st := readState(g, dir)
		pids, ports := runProcesses(g, st)
		g.Expect(ports).NotTo(BeEmpty())
		g.Expect(karmadaClusters(g, dir)).To(ConsistOf("m1"))

		out, err = runCLI(t, "up", "--dir="+dir)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("already running"))

		out, err = runCLI(t, "down", "--dir="+dir)
		g.Expect(err).NotTo(HaveOccurred(), out)
		expectGone(g, pids, ports)
		g.Expect(filepath.Join(dir, "state.json")).NotTo(BeAnExistingFile())
		g.Expect(filepath.Join(dir, "localup.pid")).NotTo(BeAnExistingFile())

		out, err = runCLI(t, "down", "--dir="+dir)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("nothing running"))
	})

	t.Run("supervisor killed", func(t *testing.T) {
		g := NewWithT(t)
		out, err := runCLI(t, "up", "--dir="+dir, "--members=1", "--nodes=1")
		g.Expect(err).NotTo(HaveOccurred(), out)
		st := readState(g, dir)
		pids, ports := runProcesses(g, st)
		g.Expect(syscall.Kill(st.SupervisorPID, syscall.SIGKILL)).To(Succeed())
		expectGone(g, pids, ports)
		out, err = runCLI(t, "down", "--dir="+dir)
		g.Expect(err).NotTo(HaveOccurred(), out)
	})
}

func readState(g Gomega, dir string) state {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	g.Expect(err).NotTo(HaveOccurred())
	var st state
	g.Expect(json.Unmarshal(b, &st)).To(Succeed())
	g.Expect(st.Processes).NotTo(BeEmpty())
	return st
}

// runProcesses returns the PIDs of the run (supervisor included) and the TCP ports they listen on.
func runProcesses(g Gomega, st state) ([]int, map[int]bool) {
	pids := []int{st.SupervisorPID}
	for _, p := range st.Processes {
		g.Expect(alive(p.PID)).To(BeTrue(), "%s", p.Name)
		pids = append(pids, p.PID)
	}
	return pids, listeningPorts(g, pids)
}

func expectGone(g Gomega, pids []int, ports map[int]bool) {
	for _, pid := range pids {
		g.Eventually(func() bool { return alive(pid) }).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).
			Should(BeFalse(), "pid %d still running", pid)
	}
	open := allListeningPorts(g)
	for p := range ports {
		g.Expect(open[p]).To(BeFalse(), "port %d still listening", p)
	}
}

func karmadaClusters(g Gomega, dir string) []string {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "karmada.kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := cs.RESTClient().Get().AbsPath("/apis/cluster.karmada.io/v1alpha1/clusters").DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	g.Expect(json.Unmarshal(raw, &list)).To(Succeed())
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	return names
}

// listeningPorts maps the pids' socket inodes to LISTEN entries of /proc/net/tcp{,6}.
func listeningPorts(g Gomega, pids []int) map[int]bool {
	inodes := map[string]bool{}
	for _, pid := range pids {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err == nil && strings.HasPrefix(link, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
			}
		}
	}
	ports := map[int]bool{}
	for _, e := range listenEntries(g) {
		if inodes[e.inode] {
			ports[e.port] = true
		}
	}
	return ports
}

func allListeningPorts(g Gomega) map[int]bool {
	ports := map[int]bool{}
	for _, e := range listenEntries(g) {
		ports[e.port] = true
	}
	return ports
}

type listenEntry struct {
	port  int
	inode string
}

func listenEntries(g Gomega) []listenEntry {
	var out []listenEntry
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A = LISTEN
				continue
			}
			local := fields[1]
			port, err := strconv.ParseInt(local[strings.LastIndex(local, ":")+1:], 16, 32)
			g.Expect(err).NotTo(HaveOccurred())
			out = append(out, listenEntry{port: int(port), inode: fields[9]})
		}
		file.Close()
	}
	return out
}
