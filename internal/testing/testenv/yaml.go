package testenv

import "github.com/gatehouse-dev/gatehouse/internal/manifests"

// YAMLDocuments splits a multi-document YAML stream; see manifests.YAMLDocuments.
var YAMLDocuments = manifests.YAMLDocuments
