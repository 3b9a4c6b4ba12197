// Package guard holds what stands between a tenant's write and configcheck's
// rendering of it: the object's bounds, measured before it is decoded, and
// the config's turns and pending changes, so that tenants who write at once
// are judged as if their changes met.
//
// # Contract
//
//   - [MeasureRaw] reads an object's JSON in one pass without decoding it,
//     and [ValidateBounds] refuses an object past its watched resource's
//     bounds ([spec.Bounds]) naming its own size, the bound and how to
//     proceed; an object stored before the bounds were stated may stay as
//     large as it is, or shrink, never grow.
//   - [Admissions] gives one config's admissions turns: fair by party (a
//     namespace, and for a caller Gatehouse could not verify the user it
//     claims too), at most [MaxTenantWaiting] waiting per party, a
//     deletion ahead of its own party's waiters. Only a change the API
//     server will store ([Recorded]: not a dry run, not an unverified
//     review) is remembered as pending, for [PendingTTL] at most; the
//     others take turns of their own and never hold a recorded change's.
//   - Each admission is judged over the stores with the earlier pending
//     changes applied ([Admissions.Overlay]), so two changes that break
//     the rendering only together are never both admitted.
//   - An admission Gatehouse has no capacity to decide in time is shed
//     ([Shed]): a create or update is undecided (the failurePolicy
//     applies), a DELETE is admitted with a warning, never refused for
//     Gatehouse's load.
//
// The package holds no cluster client and renders nothing.
package guard
