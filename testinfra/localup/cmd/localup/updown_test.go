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

	"github.com/lbfed/lbfed/testinfra/localup/testenv"
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
		expectGone(g, pids, ports, dir)
		g.Expect(filepath.Join(dir, "state.json")).NotTo(BeAnExistingFile())
		g.Expect(filepath.Join(dir, "localup.pid")).NotTo(BeAnExistingFile())

		out, err = runCLI(t, "down", "--dir="+dir)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("nothing running"))
	})

	t.Run("with a Pull member, supervisor killed", func(t *testing.T) {
		g := NewWithT(t)
		out, err := runCLI(t, "up", "--dir="+dir, "--members=1", "--pull-members=1", "--nodes=1")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("1 in Push mode, 1 in Pull mode"))
		g.Expect(out).To(ContainSubstring("--kubeconfig=" + filepath.Join(dir, "m2.kubeconfig")))
		g.Expect(karmadaClusters(g, dir)).To(ConsistOf("m1", "m2"))
		st := readState(g, dir)
		g.Expect(st.Processes).To(ContainElement(HaveField("Name", "karmada-agent-m2")))
		pids, ports := runProcesses(g, st)
		g.Expect(syscall.Kill(st.SupervisorPID, syscall.SIGKILL)).To(Succeed())
		expectGone(g, pids, ports, dir)
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

// runProcesses returns the PIDs of the run (supervisor included) and the addresses they listen on.
func runProcesses(g Gomega, st state) ([]int, map[string]bool) {
	pids := []int{st.SupervisorPID}
	for _, p := range st.Processes {
		g.Expect(alive(p.PID)).To(BeTrue(), "%s", p.Name)
		pids = append(pids, p.PID)
	}
	return pids, listeningPorts(g, pids)
}

// expectGone checks that the run's processes are gone and none of its listening sockets is
// still open in a process of the run. The ports themselves may be reused at once by other
// tests on the machine, so a socket only counts if its owner belongs to this run folder.
func expectGone(g Gomega, pids []int, sockets map[string]bool, dir string) {
	for _, pid := range pids {
		g.Eventually(func() bool { return alive(pid) }).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).
			Should(BeFalse(), "pid %d still running", pid)
	}
	for _, e := range listenEntries(g) {
		if !sockets[e.addr] {
			continue
		}
		for _, owner := range socketOwners(e.inode) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", owner))
			g.Expect(string(cmdline)).NotTo(ContainSubstring(dir), "%s still listened on by pid %d", e.addr, owner)
		}
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

// listeningPorts returns the local addresses (hex ip:port as in /proc/net/tcp) the pids listen on.
func listeningPorts(g Gomega, pids []int) map[string]bool {
	inodes := map[string]bool{}
	for _, pid := range pids {
		for _, inode := range socketInodes(pid) {
			inodes[inode] = true
		}
	}
	addrs := map[string]bool{}
	for _, e := range listenEntries(g) {
		if inodes[e.inode] {
			addrs[e.addr] = true
		}
	}
	return addrs
}

func socketInodes(pid int) []string {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil
	}
	var out []string
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"))
		}
	}
	return out
}

// socketOwners returns the pids holding the socket inode.
func socketOwners(inode string) []int {
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		for _, i := range socketInodes(pid) {
			if i == inode {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

type listenEntry struct {
	addr  string // hex ip:port, as in /proc/net/tcp
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
			out = append(out, listenEntry{addr: fields[1], inode: fields[9]})
		}
		g.Expect(sc.Err()).NotTo(HaveOccurred())
		file.Close()
	}
	return out
}
