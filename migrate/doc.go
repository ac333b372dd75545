// Package migrate resolves and applies state-migration chains for records
// that outlive a deploy: sessions (sessions §7) and checkpoints
// (pipeline-utilities §10.12).
//
// A [Registry] holds migrations keyed by (from, to) schema version. A
// record stored at one version is brought to the current one along the
// unique shortest chain of registered migrations (breadth-first search).
// Registering the same pair twice, or having two distinct shortest chains,
// is ambiguous; having no chain is missing; a migration that fails stops
// the chain. Each failure is a categorized *[Error]:
//
//	reg, err := migrate.NewRegistry(migrate.Session,
//		migrate.Migration{From: "v1", To: "v2", Fn: addLocale},
//		migrate.Migration{From: "v2", To: "v3", Fn: splitName},
//	)
//	state, err = reg.Apply(state, "v1", "v3") // addLocale, then splitName
//
// Migrations work on the structural form of a state (a decoded JSON
// object), independent of the current Go types, and must be pure. The
// graph engine hands sessions and checkpoints over in the same form:
// objects are map[string]any, arrays []any, strings, bools and nil as
// encoding/json decodes them, and numbers kept exact: an integer is an
// int (an int64 or uint64 when it does not fit int, a json.Number when
// it does not fit 64 bits either), any other number a float64.
// A Registry is immutable and safe for concurrent use.
package migrate
