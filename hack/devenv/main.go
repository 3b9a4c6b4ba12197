// Command devenv is `make run`: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, fake Nodes and Gatehouse on loopback, with every module
// enabled, until Ctrl-C or SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/devenv"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
	"github.com/gatehouse-dev/gatehouse/internal/testenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var names []string
	missingHAProxy := ""
	for _, m := range catalogue.All() {
		if m.Name() == "configcheck" {
			if err := haproxyInstalled(); err != nil {
				missingHAProxy = err.Error()
				continue
			}
			if caps := sandbox.Available(); !caps.Complete() && !strings.Contains(os.Getenv("GATEHOUSE_ARGS"), "--configcheck-allow-unconfined") {
				missingHAProxy = "this kernel cannot confine its checks (" + strings.Join(caps.Missing(), "; ") +
					"); GATEHOUSE_ARGS=--configcheck-allow-unconfined make run starts it anyway"
				continue
			}
		}
		names = append(names, m.Name())
	}
	if missingHAProxy != "" {
		fmt.Fprintln(os.Stderr, "gatehouse: configcheck is left out:", missingHAProxy)
	}
	extra := strings.Fields(os.Getenv("GATEHOUSE_ARGS"))
	fmt.Println("gatehouse: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, fake nodes and gatehouse (modules:", strings.Join(names, ", ")+")")
	env, err := devenv.Start(ctx, devenv.Options{Modules: strings.Join(names, ","), ExtraArgs: extra, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
		os.Exit(1)
	}
	cp := env.ControlPlane
	var controllers []string
	for _, c := range testenv.Controllers {
		controllers = append(controllers, strings.TrimSuffix(c, "-controller"))
	}
	fmt.Printf("gatehouse: kube-controller-manager (%s) and kube-scheduler run; their logs are in .gatehouse/\n", strings.Join(controllers, ", "))
	fmt.Printf("gatehouse: fake nodes %s (zones %s): Pods are scheduled onto them but never started (no kubelet)\n",
		strings.Join(cp.Nodes.Names(), ", "), strings.Join(cp.Nodes.Zones(), ", "))
	fmt.Printf(`gatehouse: webhooks at %s, metrics at http://127.0.0.1:8080/metrics
gatehouse: kubeconfig written to .gatehouse/kubeconfig; try
    bin/kubectl --kubeconfig .gatehouse/kubeconfig get validatingwebhookconfigurations
gatehouse: ready
`, env.URL)
	if missingHAProxy != "" {
		fmt.Fprintln(os.Stderr, "gatehouse: configcheck is not running:", missingHAProxy)
	}

	code := 0
	select {
	case <-ctx.Done():
		fmt.Println("\ngatehouse: shutting down")
	case err := <-env.Exited():
		fmt.Fprintln(os.Stderr, "gatehouse: the gatehouse process exited:", err)
		code = 1
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
		code = 1
	}
	fmt.Println("gatehouse: stopped")
	os.Exit(code)
}

// haproxyInstalled says how to install haproxy when configcheck cannot find
// it (it runs haproxy -c on every rendering).
func haproxyInstalled() error {
	if _, err := exec.LookPath("haproxy"); err == nil {
		return nil
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return nil
	}
	return fmt.Errorf("haproxy is not installed; install Debian's package (sudo apt-get install haproxy) and run make run again")
}
