// Command multiproject-controller-manager runs every tenant's controllers in one process.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
