package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/binaries"
)

func init() {
	commands = append(commands,
		command{name: "up", short: "start Karmada and member clusters in the background and print how to use them", run: runUp},
		command{name: "down", short: "stop what `up` started and wait until every process is gone", run: runDown},
		command{name: "supervise", run: runSupervise}, // internal: the background process of `up`
	)
}

// afterReady hooks extend `up`: lbfed's components and examples register here (from their own
// file in this package) to be started once the topology is ready, and are stopped first by
// `down`.
var afterReady []func(ctx context.Context, t *localup.Topology) error

// upFlags are shared by up and supervise, which receives them verbatim.
type upFlags struct {
	dir         string
	members     int
	pullMembers int
	nodes       int
	timeout     time.Duration
}

func (f *upFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dir, "dir", "", "run folder (default <repo>/.localup/run)")
	fs.IntVar(&f.members, "members", 2, "number of member clusters joined in Push mode (m1..mN)")
	fs.IntVar(&f.pullMembers, "pull-members", 0, "number of further member clusters joined in Pull mode by a karmada-agent each (mN+1..)")
	fs.IntVar(&f.nodes, "nodes", 2, "kwok fake nodes per member")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up if the topology is not ready in this time")
}

func (f *upFlags) args() []string {
	return []string{"--dir=" + f.dir, "--members=" + strconv.Itoa(f.members), "--pull-members=" + strconv.Itoa(f.pullMembers),
		"--nodes=" + strconv.Itoa(f.nodes), "--timeout=" + f.timeout.String()}
}

func (f *upFlags) resolveDir() error {
	if f.dir == "" {
		root, err := binaries.RepoRoot()
		if err != nil {
			return err
		}
		f.dir = filepath.Join(root, ".localup", "run")
	}
	var err error
	f.dir, err = filepath.Abs(f.dir)
	return err
}

// state is what `up` leaves in the run folder for `down` and for people.
type state struct {
	SupervisorPID int               `json:"supervisorPID"`
	Started       time.Time         `json:"started"`
	Kubeconfigs   map[string]string `json:"kubeconfigs"`
	Processes     []stateProcess    `json:"processes"`
}

type stateProcess struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	Path string `json:"path"`
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }
func pidPath(dir string) string   { return filepath.Join(dir, "localup.pid") }

func runUp(ctx context.Context, args []string) error {
	var f upFlags
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.resolveDir(); err != nil {
		return err
	}
	if pid, ok := runningSupervisor(f.dir); ok {
		fmt.Printf("already running (localup supervisor pid %d)\n\n", pid)
		return printUsage(f.dir)
	}
	// Fail here, in the foreground, rather than in the background process.
	if _, err := binaries.Locate(""); err != nil {
		return err
	}
	if err := cleanRunDir(f.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(f.dir, "localup.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// The supervisor reports progress, then "ready" or "error: …", on a pipe and closes it.
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{"supervise"}, f.args()...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{pw} // fd 3 in the child
	// Own session: the supervisor outlives this command and the terminal it ran in.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start supervisor: %w", err)
	}
	pw.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Ctrl-C while starting: the supervisor, in its own session, did not get it; pass it on so
	// that it stops what it started (the pipe then closes and the loop below ends).
	reported := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case <-reported:
		}
	}()

	var result string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		if line == "ready" || strings.HasPrefix(line, "error: ") {
			result = line
			break
		}
		fmt.Fprintln(os.Stderr, line)
	}
	close(reported)
	if result != "ready" {
		select {
		case <-exited:
		case <-time.After(30 * time.Second): // it stops its processes before exiting
		}
		if result == "" {
			result = "error: supervisor exited without reporting"
		}
		return fmt.Errorf("%s\nsee %s and %s", strings.TrimPrefix(result, "error: "), logPath, filepath.Join(f.dir, "logs"))
	}
	members := fmt.Sprintf("%d member clusters", f.members)
	if f.pullMembers > 0 {
		members = fmt.Sprintf("%d member clusters (%d in Push mode, %d in Pull mode)", f.members+f.pullMembers, f.members, f.pullMembers)
	}
	fmt.Printf("\nKarmada and %s are up after %.1fs (supervisor pid %d).\n\n", members, time.Since(start).Seconds(), cmd.Process.Pid)
	return printUsage(f.dir)
}

// cleanRunDir removes a previous run's PKI, data and logs — but only from a folder that is
// empty or was made by localup, so a mistyped --dir cannot wipe anything else.
func cleanRunDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clean run folder: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "localup.log")); err != nil {
		return fmt.Errorf("refusing to use %s: not empty and not a localup run folder", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clean run folder: %w", err)
	}
	return nil
}

func printUsage(dir string) error {
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		return fmt.Errorf("read run state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("read run state: %w", err)
	}
	set, err := binaries.Locate("")
	if err != nil {
		return err
	}
	var members []string
	for name := range st.Kubeconfigs {
		if name != localup.KarmadaName {
			members = append(members, name)
		}
	}
	sort.Strings(members)
	kubectl := set.Path(binaries.Kubectl)
	fmt.Printf("Point kubectl at the Karmada API server:\n\n")
	fmt.Printf("  export KUBECONFIG=%s\n", st.Kubeconfigs[localup.KarmadaName])
	fmt.Printf("  kubectl get clusters\n\n")
	fmt.Printf("and at the members:\n\n")
	for _, m := range members {
		fmt.Printf("  kubectl --kubeconfig=%s get nodes,pods -A\n", st.Kubeconfigs[m])
	}
	fmt.Printf("\nNo kubectl? Use the one built for this topology:\n\n  alias kubectl=%s karmadactl=%s\n\n", kubectl, set.Path(binaries.Karmadactl))
	printDemo(dir, kubectl, st.Kubeconfigs[localup.KarmadaName])
	fmt.Printf("Logs: %s/logs/  Stop everything: make down\n", dir)
	return nil
}

// runningSupervisor returns the pid of the run folder's supervisor if it is alive.
func runningSupervisor(dir string) (int, bool) {
	b, err := os.ReadFile(pidPath(dir))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !isSupervisor(pid) {
		return 0, false
	}
	return pid, true
}

// isSupervisor checks that pid is still a `localup supervise`, not an unrelated process that
// reused the number.
func isSupervisor(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	return len(args) > 1 && args[1] == "supervise" && alive(pid)
}

// runSupervise is the background half of `up`: it owns the topology's processes (they die with
// it, even on SIGKILL) and stops them in order on SIGTERM or SIGINT.
func runSupervise(ctx context.Context, args []string) error {
	var f upFlags
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.resolveDir(); err != nil {
		return err
	}
	// fd 3 is the progress pipe from `up`; without it (started by hand) report to stderr only.
	var report io.WriteCloser = nopCloser{io.Discard}
	if pipe := os.NewFile(3, "progress"); pipe != nil {
		if _, err := pipe.Stat(); err == nil {
			// Inherited without close-on-exec: set it, or every process started below would hold
			// the pipe open and `up` would never see it close.
			syscall.CloseOnExec(3)
			report = pipe
		}
	}
	defer report.Close()
	if err := os.WriteFile(pidPath(f.dir), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		fmt.Fprintf(report, "error: %v\n", err)
		return err
	}
	defer os.Remove(pidPath(f.dir))

	logger := newLineLogger(io.MultiWriter(os.Stderr, lineWriter{report}))
	startCtx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	topo, err := localup.StartTopology(startCtx, localup.TopologyOptions{
		Dir:                f.dir,
		Members:            f.members,
		PullMembers:        f.pullMembers,
		FakeNodesPerMember: f.nodes,
		// lbfed's CRDs come with its chart (the demo's afterReady hook), as in a real install.
		AfterReady: afterReady,
		Logger:     logger,
	})
	if err != nil {
		fmt.Fprintf(report, "error: %v\n", err)
		return err
	}
	if err := writeState(f.dir, topo); err != nil {
		_ = topo.Stop()
		fmt.Fprintf(report, "error: %v\n", err)
		return err
	}
	fmt.Fprintln(report, "ready")
	report.Close()
	logger = newLineLogger(os.Stderr)

	// Watch for dying processes while waiting to be stopped: report them in the log, which is
	// where someone debugging a broken topology looks.
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	reported := false
	for {
		select {
		case <-ctx.Done():
			logger.Info("stopping")
			err := topo.Stop()
			os.Remove(statePath(f.dir))
			if err != nil {
				logger.Error(err, "stop")
				return err
			}
			logger.Info("stopped")
			return nil
		case <-tick.C:
			if err := topo.CheckProcesses(); err != nil && !reported {
				logger.Error(err, "a process of the topology died")
				reported = true
			}
		}
	}
}

func writeState(dir string, t *localup.Topology) error {
	st := state{SupervisorPID: os.Getpid(), Started: time.Now(), Kubeconfigs: map[string]string{}}
	st.Kubeconfigs[localup.KarmadaName] = t.Karmada().KubeconfigPath()
	for _, m := range t.Members() {
		st.Kubeconfigs[m.Name()] = m.KubeconfigPath()
	}
	for _, p := range t.Processes() {
		if exited, _ := p.Exited(); !exited {
			st.Processes = append(st.Processes, stateProcess{Name: p.Name, PID: p.PID(), Path: p.Path})
		}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(statePath(dir), b, 0o644)
}

func runDown(ctx context.Context, args []string) error {
	var f upFlags
	fs := flag.NewFlagSet("down", flag.ContinueOnError)
	fs.StringVar(&f.dir, "dir", "", "run folder (default <repo>/.localup/run)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.resolveDir(); err != nil {
		return err
	}
	var st state
	if b, err := os.ReadFile(statePath(f.dir)); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	pid, running := runningSupervisor(f.dir)
	if !running && len(st.Processes) == 0 {
		fmt.Println("nothing running")
		return nil
	}
	if running {
		fmt.Printf("stopping localup (pid %d) ...\n", pid)
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal supervisor: %w", err)
		}
		// The supervisor stops clients, apiservers and etcd in order (apiservers take a few
		// seconds each); past the deadline, SIGKILL — its children die with it.
		if !waitGone(ctx, []int{pid}, 90*time.Second) {
			fmt.Println("supervisor did not stop in time, killing it")
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Belt and braces: every process recorded at start-up must be gone. Anything left (only
	// possible if the supervisor was killed in a way PDEATHSIG does not cover) is killed by PID,
	// after checking the PID still runs the recorded binary.
	var left []int
	for _, p := range st.Processes {
		if alive(p.PID) && exeIs(p.PID, p.Path) {
			left = append(left, p.PID)
		}
	}
	if !waitGone(ctx, left, 15*time.Second) {
		for _, p := range left {
			if alive(p) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if !waitGone(ctx, left, 5*time.Second) {
			return fmt.Errorf("processes %v still running", left)
		}
	}
	os.Remove(statePath(f.dir))
	os.Remove(pidPath(f.dir))
	fmt.Println("stopped; no localup process left")
	return nil
}

// waitGone polls until none of pids is alive or timeout passes; it reports whether they are gone.
func waitGone(ctx context.Context, pids []int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		gone := true
		for _, p := range pids {
			if alive(p) {
				gone = false
			}
		}
		if gone {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive reports whether pid runs and is not a zombie (an orphan may wait to be reaped).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	rest := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	return len(rest) > 0 && rest[0] != "Z" && rest[0] != "X"
}

func exeIs(pid int, path string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && exe == path
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// lineWriter forwards log lines to the progress pipe, ignoring a closed pipe.
type lineWriter struct{ w io.Writer }

func (l lineWriter) Write(p []byte) (int, error) {
	_, _ = l.w.Write(p)
	return len(p), nil
}
