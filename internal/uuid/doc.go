// Package uuid mints random (version 4) UUIDs in canonical 36-character
// form, the format the OpenArmature spec requires for framework-minted
// invocation and correlation ids. It is safe for concurrent use.
//
//	id := uuid.New() // e.g. "0b37d810-613b-4496-833e-291cc1060c31"
//	uuid.Valid(id)   // true
package uuid
