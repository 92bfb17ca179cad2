/*
Copyright The multiproject-controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command fake-gce serves the fake Compute Engine API of package fakegce on a TCP address, for local demos: point
// the manager's --gce-endpoint at the URL it prints. It keeps its state in memory and logs one line per call.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

func main() {
	listen := pflag.String("listen", "127.0.0.1:8086", "TCP address to serve on (host:port; port 0 picks a free one).")
	opDelay := pflag.Duration("operation-delay", 0, "How long each operation stays RUNNING before it completes.")
	opPolls := pflag.Int("operation-polls", 0, "How many zoneOperations get/wait calls each operation needs before it completes.")
	reads := pflag.Int("reads-per-minute", 0, "Per-project read quota per minute (0: unlimited).")
	mutations := pflag.Int("mutations-per-minute", 0, "Per-project mutation quota per minute (0: unlimited).")
	maxEndpoints := pflag.Int("max-endpoints-per-neg", 10000, "Most endpoints one NEG may hold.")
	pflag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, *listen, fakegce.Options{
		OperationDelay:     *opDelay,
		OperationPolls:     *opPolls,
		Quota:              fakegce.Quota{ReadsPerMinute: *reads, MutationsPerMinute: *mutations},
		MaxEndpointsPerNEG: *maxEndpoints,
		OnCall:             func(c fakegce.CallRecord) { logCall(log, c) },
	}); err != nil {
		log.Error("fake-gce failed", "err", err)
		os.Exit(1)
	}
}

// run serves until SIGINT or SIGTERM, then drains in-flight calls for up to five seconds.
func run(log *slog.Logger, addr string, opts fakegce.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: fakegce.New(opts), ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving the fake compute/v1 API", "endpoint", fmt.Sprintf("http://%s%s", l.Addr(), fakegce.APIPrefix))
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// logCall writes one line per call: what was called, on what, and how it was answered.
func logCall(log *slog.Logger, c fakegce.CallRecord) {
	if c.Method == "" {
		log.Warn("unserved request", "path", c.Resource, "status", c.Status, "reason", c.Reason)
		return
	}
	attrs := []any{"method", c.Method, "project", c.Project, "zone", c.Zone, "resource", c.Resource, "status", c.Status}
	if c.Endpoints > 0 {
		attrs = append(attrs, "endpoints", c.Endpoints)
	}
	if c.Operation != "" {
		attrs = append(attrs, "operation", c.Operation)
	}
	if c.Reason != "" {
		attrs = append(attrs, "reason", c.Reason)
	}
	log.Info("call", append(attrs, "duration", c.Duration.Round(time.Microsecond))...)
}
