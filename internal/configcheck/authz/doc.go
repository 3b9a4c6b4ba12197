// Package authz answers, for configcheck, what a config's author may make
// Gatehouse do. A config makes Gatehouse's ServiceAccount read, on its
// author's behalf, every object its watched resources select, publish what
// its templates make of them, and refuse changes to them: without these
// checks anyone allowed to write a config in one namespace could read
// (through the rendering) and block what they cannot touch themselves.
//
// # Contract
//
//   - [Requirements] lists every right a config exercises (list and watch
//     each watched resource; create, update and delete where its webhook
//     may refuse changes; writing the published ConfigMap and Secret), in
//     a fixed order; [Authorize] refuses the first one its author lacks,
//     with a message naming the right, the spec field that asks for it
//     and how to proceed. A namespace is named only where the selector
//     names it: a refusal never tells whoever asks which namespaces carry
//     a label.
//   - Questions are SubjectAccessReviews asked live of the API server
//     (only it combines RBAC with the other authorizers), each once per
//     author, right and namespace for a short time ([Cache]: 10 s, at most
//     16 in flight for the process, 10,000 answers kept); a review that
//     fails is an error, never an answer.
//   - [CheckAccess] is where a stored config reads: a namespace that
//     joins its selection later is read only once its author was asked
//     about it; [Access.Permits] answers nothing before the first check.
//   - The author is whom Gatehouse recorded ([Record], in
//     [AuthorAnnotation]): the API server's userInfo of the write that
//     last changed the spec, signed by this install (module.Records) over
//     the config's kind, namespace, name, uid and generation.
//     [VerifiedAuthor] honours a record only when it verifies for this
//     very object and spec; a record a client wrote, copied from another
//     config or kind, or left from an older spec is not honoured, and a
//     config in a namespace the webhooks never see has no author at all.
//
// The package holds no cluster client: configcheck passes the live review,
// the namespaces a selector selects and the signing keys in.
package authz
