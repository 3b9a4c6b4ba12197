// Command devenv is `make run`: etcd, kube-apiserver and Gatehouse on
// loopback, with every module enabled, until Ctrl-C or SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/devenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var names []string
	for _, m := range catalogue.All() {
		names = append(names, m.Name())
	}
	extra := strings.Fields(os.Getenv("GATEHOUSE_ARGS"))
	fmt.Println("gatehouse: starting etcd, kube-apiserver and gatehouse (modules:", strings.Join(names, ", ")+")")
	env, err := devenv.Start(ctx, devenv.Options{Modules: strings.Join(names, ","), ExtraArgs: extra, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
		os.Exit(1)
	}
	fmt.Printf(`gatehouse: webhooks at %s, metrics at http://127.0.0.1:8080/metrics
gatehouse: kubeconfig written to .gatehouse/kubeconfig; try
    bin/kubectl --kubeconfig .gatehouse/kubeconfig get validatingwebhookconfigurations
gatehouse: ready
`, env.URL)

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
