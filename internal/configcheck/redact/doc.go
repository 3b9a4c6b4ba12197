// Package redact decides what a tenant is shown of a watched object's
// denial. configcheck judges a tenant's Ingress (or any watched object) by
// rendering every tenant's objects into one haproxy.cfg and checking it, so
// a denial quotes haproxy's alerts ('be_team-b_api_80'), the check
// policy's lines and the templates' fail texts: quoted as is, a tenant
// would learn the names of other tenants' backends, hosts and Secrets.
// The caller is a tenant of the config, not its author, and Gatehouse
// cannot ask of each name whether they may read the object it came from.
//
// # Contract
//
// What a caller is shown holds no name they did not send or could not
// read themselves:
//
//   - [Quoted] (haproxy's and the check policy's text) keeps a line only
//     when every name it quotes is made of [Words] the caller sent (their
//     object's and old object's values, their namespace and name); any
//     other line is replaced whole, never name by name, so that guesses
//     planted in a request learn nothing word by word.
//   - [RenderFailure] (a template's failure text) keeps a line that quotes
//     nothing of the judged objects of other namespaces ([DataWords]); in
//     any other line every word of the judged objects or of the request is
//     replaced, except the config's own words (its author's, shown to all).
//   - A request's words are bounded ([WordsOf]): a string over 1 KiB is
//     no word of the caller's, and the walk stops at depth 32, so a long
//     or deep request neither vouches for long names nor makes the
//     redaction costly.
//
// The config's readers find the whole failure in its status and events;
// only the tenant's answer is redacted. The package is pure: no I/O, no
// state.
package redact
