// Package policytest runs `gatehouse test`: suites of admission and
// conversion requests, each with the cluster state it is decided against
// and what the answer must be, decided offline by the code the server runs.
//
// A suite (gatehouse.dev/v1alpha1 TestSuite, see [Suite]) is read strictly:
// an unknown field, a missing required one or a name no module declares is
// an error that names its file and line. [Run] then, per suite:
//
//  1. serves the suite's objects from an in-memory API server (apiserver.go)
//     that answers list, watch and get as kube-apiserver does, including
//     label and field selectors and metadata-only reads;
//  2. builds each module the suite uses with New and Setup against the
//     server's own module.Host (internal/app's Hosts, host.go) over that
//     API server: its caches are real controller-runtime caches, and its
//     optional kinds are followed by the server's kinds tracker
//     (internal/kinds) over the CRDs the API server serves for the custom
//     kinds the suite knows (crds.go), so that scopes, transforms, indexes,
//     event handlers and optional kinds behave as in a cluster. Of what
//     the modules register, only the caches and the tracker run: no
//     controller, audit or other loop of a module's;
//  3. registers the modules' webhooks on a real internal/server.Server with
//     each module's enforcement, and posts every request to it as an
//     AdmissionReview or ConversionReview, without TLS or a port: decoding,
//     enforcement (warn mode), panic recovery and the answer's encoding are
//     the server's own. A request goes to the webhooks kube-apiserver would
//     call: their rules, then (match.go) their namespaceSelector,
//     objectSelector and matchConditions as Gatehouse renders them,
//     weighed by kube-apiserver's own matchers;
//  4. compares the answer with the test's expectation, each difference
//     reported on a line of its own (expected, got, the field's path).
//
// A suite's configChecks, and a file `gatehouse test` is given that is no
// suite, run the offline check (module.OfflineChecker) of the module that
// declares one for the document's kind: configcheck's for an
// HAProxyTemplateConfig. This package names no module.
//
// Nothing reaches a cluster: the in-memory API server refuses every write
// but SubjectAccessReviews (answered from the suite's permissions),
// Gatehouse's own SelfSubjectAccessReviews (allowed, as its chart's RBAC
// allows them) and Events (accepted and dropped).
package policytest
