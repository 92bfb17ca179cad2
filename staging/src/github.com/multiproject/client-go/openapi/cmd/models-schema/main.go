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

// Command models-schema prints the OpenAPI v2 definitions of every type in
// github.com/multiproject/client-go/openapi as one swagger JSON document.
//
// hack/update-codegen.sh feeds that document to applyconfiguration-gen. The
// generator embeds it in applyconfiguration/internal, and everything that
// needs to know a type's structure at run time reads it from there: the
// field-managed fake clientset (fake.NewClientset) for server-side apply, and
// the Extract* functions that read back a field manager's fields. Without it
// those only know "some JSON object" and reject or mangle our types.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/multiproject/client-go/openapi"
)

func main() {
	if err := printSwagger(); err != nil {
		fmt.Fprintf(os.Stderr, "models-schema: %v\n", err)
		os.Exit(1)
	}
}

func printSwagger() error {
	reference := func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + common.EscapeJsonPointer(definitionName(name)))
	}
	definitions := spec.Definitions{}
	for name, definition := range openapi.GetOpenAPIDefinitions(reference) {
		schema := definition.Schema
		// A type whose v3 schema cannot be expressed in v2 carries its v2
		// form in an extension; the output must be v2 throughout.
		if v2, ok := definition.Schema.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
			schema = v2
		}
		definitions[definitionName(name)] = schema
	}
	document := spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "multiproject models", Version: "unversioned"}},
		Definitions: definitions,
	}}
	encoded, err := json.MarshalIndent(&document, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(os.Stdout, "%s\n", encoded)
	return err
}

// definitionName turns a Go type name such as
// "github.com/multiproject/api/multiproject/v1alpha1.ProviderConfig" into the
// name the Kubernetes tooling uses for it in swagger documents, with the
// domain reversed: "com.github.multiproject.api.multiproject.v1alpha1.ProviderConfig".
func definitionName(goName string) string {
	parts := strings.Split(goName, "/")
	if domain := strings.Split(parts[0], "."); len(domain) > 1 {
		for i, j := 0, len(domain)-1; i < j; i, j = i+1, j-1 {
			domain[i], domain[j] = domain[j], domain[i]
		}
		parts[0] = strings.Join(domain, ".")
	}
	return strings.Join(parts, ".")
}
