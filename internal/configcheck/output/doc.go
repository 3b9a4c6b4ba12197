// Package output says what a config of Gatehouse's kind publishes: the keys
// of its ConfigMap and Secret ([Of]), whether they fit in what the API
// server accepts ([Data.Fits]), and whether an object of a published name
// is the config's to write ([NotOwned]).
//
// # Contract
//
//   - A rendering that would not fit is refused whole, naming its three
//     largest keys: nothing is written, and the last accepted rendering
//     stays published.
//   - An object is the config's only when this very config (its UID)
//     controls it and it carries Gatehouse's label: an object someone
//     else made under the name, before the config or to take its place,
//     is never written to or adopted.
package output
