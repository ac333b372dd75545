// Package errcat is the catalog of OpenArmature error categories and the
// small protocol every categorized Armature error implements.
//
// The specification names a category for every failure it defines
// ("node_exception", "reducer_error", "session_load_failed", ...). In Go a
// category is a [Category] value; errors that carry one implement
// [Categorized]. Because a Category is itself an error and every Armature
// error type matches its own category in its Is method, both forms work:
//
//	errcat.Of(err) == errcat.NodeException
//	errors.Is(err, errcat.NodeException)
//
// [Of] returns the outermost category in a chain; [Chain] lists all of
// them, outermost first, which is how spec "cause chains" are read.
//
// The package is a leaf: it imports nothing from Armature, so any layer
// (the engine, stores, the harness, the HTTP server) can name categories.
package errcat
