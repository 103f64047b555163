package localup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
)

// The test binary doubles as the child processes of these tests (LOCALUP_HELPER selects a role),
// so they need nothing but Go.
const helperEnv = "LOCALUP_HELPER"

func TestMain(m *testing.M) {
	switch role := os.Getenv(helperEnv); {
	case role == "":
		code := m.Run()
		stopFakeNodeCluster(code != 0)
		os.Exit(code)
	case strings.HasPrefix(role, "record:"):
		// record:<file>:<name> — on SIGTERM append <name> to <file> and exit.
		parts := strings.SplitN(role, ":", 3)
		helperRecord(parts[1], parts[2])
	case role == "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		select {}
	case strings.HasPrefix(role, "parent:"):
		helperParent(strings.TrimPrefix(role, "parent:"))
	default:
		fmt.Fprintln(os.Stderr, "unknown helper role", role)
		os.Exit(2)
	}
}

func helperRecord(file, name string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	fmt.Println("ready")
	<-sig
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, name)
		f.Close()
	}
	os.Exit(0)
}

// helperParent starts two children through a supervisor, prints their PIDs and blocks until
// killed: the test then checks the children die with it.
func helperParent(dir string) {
	sup, err := newSupervisor(dir, logr.Discard())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var pids []string
	for i := 0; i < 2; i++ {
		p, err := sup.start(ProcessSpec{Name: fmt.Sprintf("child%d", i), Path: os.Args[0], Env: []string{helperEnv + "=stubborn"}})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		pids = append(pids, strconv.Itoa(p.PID()))
	}
	fmt.Println("pids", strings.Join(pids, " "))
	select {}
}

func helperSpec(name string, tier Tier, env string) ProcessSpec {
	return ProcessSpec{Name: name, Path: os.Args[0], Tier: tier, Env: []string{helperEnv + "=" + env}}
}

// waitLogged waits until a helper has printed "ready" (its signal handler is installed).
func waitLogged(g Gomega, p *Process) {
	g.Eventually(func() string { return p.LogTail(1) }).WithTimeout(20 * time.Second).WithPolling(20 * time.Millisecond).Should(Equal("ready"))
}

func TestSupervisorStopsByTier(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	order := dir + "/order"
	sup, err := newSupervisor(dir+"/logs", logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	// Started in an order unrelated to the tiers, to show that tiers alone decide.
	specs := []ProcessSpec{
		helperSpec("etcd", TierStorage, "record:"+order+":etcd"),
		helperSpec("apiserver", TierAPIServer, "record:"+order+":apiserver"),
		helperSpec("controller", TierClient, "record:"+order+":controller"),
		helperSpec("aggregated", TierAggregated, "record:"+order+":aggregated"),
	}
	var procs []*Process
	for _, s := range specs {
		p, err := sup.start(s)
		g.Expect(err).NotTo(HaveOccurred())
		procs = append(procs, p)
	}
	for _, p := range procs {
		waitLogged(g, p)
	}
	var hookRan bool
	sup.onStop(func() { hookRan = true })

	g.Expect(sup.stop()).To(Succeed())
	b, err := os.ReadFile(order)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(string(b))).To(Equal([]string{"controller", "aggregated", "apiserver", "etcd"}))
	g.Expect(hookRan).To(BeTrue())
	for _, p := range procs {
		g.Expect(p.Done()).To(BeClosed())
	}
	g.Expect(sup.firstUnexpectedExit()).To(Succeed(), "stopped processes are not unexpected exits")
	_, err = sup.start(helperSpec("late", TierClient, "stubborn"))
	g.Expect(err).To(MatchError(ContainSubstring("stopping")))
}

func TestSupervisorKillsAfterTimeout(t *testing.T) {
	g := NewWithT(t)
	sup, err := newSupervisor(t.TempDir(), logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	sup.stopTimeout = 200 * time.Millisecond
	p, err := sup.start(helperSpec("stubborn", TierClient, "stubborn"))
	g.Expect(err).NotTo(HaveOccurred())
	waitLogged(g, p)
	g.Expect(sup.stop()).To(Succeed())
	exited, exitErr := p.Exited()
	g.Expect(exited).To(BeTrue())
	g.Expect(exitErr).To(MatchError(ContainSubstring("killed")))
}

func TestSupervisorReportsUnexpectedExit(t *testing.T) {
	g := NewWithT(t)
	sup, err := newSupervisor(t.TempDir(), logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	defer sup.stop()
	p, err := sup.start(helperSpec("crasher", TierClient, "no-such-role"))
	g.Expect(err).NotTo(HaveOccurred())
	<-p.Done()
	err = sup.firstUnexpectedExit()
	g.Expect(err).To(MatchError(ContainSubstring("crasher")))
	g.Expect(err).To(MatchError(ContainSubstring("unknown helper role")), "the error carries the log tail")

	// waitFor gives up as soon as a watched process is gone, with its log, instead of waiting
	// for the deadline.
	err = waitFor(t.Context(), time.Hour, "something", []*Process{p}, func(context.Context) error { return errors.New("not yet") })
	g.Expect(err).To(MatchError(ContainSubstring("crasher")))
	g.Expect(err).NotTo(MatchError(context.DeadlineExceeded))
}

// TestChildrenDieWithParent kills a parent with SIGKILL — no chance to clean up — and checks
// that its children go too (PR_SET_PDEATHSIG).
func TestChildrenDieWithParent(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=parent:"+t.TempDir())
	out, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cmd.Start()).To(Succeed())
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	fields := strings.Fields(line)
	g.Expect(fields).To(HaveLen(3), line)
	g.Expect(fields[0]).To(Equal("pids"), line)
	var pids []int
	for _, f := range fields[1:] {
		pid, err := strconv.Atoi(f)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(alive(pid)).To(BeTrue())
		pids = append(pids, pid)
	}
	g.Expect(cmd.Process.Kill()).To(Succeed())
	_ = cmd.Wait()
	for _, pid := range pids {
		g.Eventually(func() bool { return alive(pid) }).WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).
			Should(BeFalse(), "child %d outlived its killed parent", pid)
	}
}

// alive reports whether pid is a live (not zombie) process. Orphans are reparented to a
// process that may not reap them promptly, so a zombie counts as dead.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Format: pid (comm) state ...; comm may contain spaces, so split after the last ')'.
	s := string(b)
	rest := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	return len(rest) > 0 && rest[0] != "Z" && rest[0] != "X"
}
