package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"time"
)

// MigrateFileTo creates or migrates the file at path to schema version
// (1 = sessions only), as an older release of this package left it.
func MigrateFileTo(ctx context.Context, path string, version int) error {
	db, err := sql.Open("sqlite", dsn(path, "busy_timeout(5000)"))
	if err != nil {
		return err
	}
	defer db.Close()
	return migrateTo(ctx, db, migrations[:version], time.Now, slog.New(slog.DiscardHandler))
}
