// Command guestbook is the SQL guest of docs/CLASSES.md: POST signs the book for
// ?who= with the body; GET reads it.
package main

import (
	"errors"
	"strconv"

	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

func init() { guest.Handle(serve) }

func serve(r *guest.Request) *guest.Response {
	if _, err := guest.SQL.Exec("CREATE TABLE IF NOT EXISTS signed(id INTEGER PRIMARY KEY, who TEXT, note TEXT)"); err != nil {
		return guest.Text(500, err.Error()+"\n")
	}
	who, _ := r.Query("who")
	if r.Method == "POST" {
		res, err := guest.SQL.Exec("INSERT INTO signed(who, note) VALUES (?, ?)", who, string(r.Body))
		if errors.Is(err, guest.ErrLimit) {
			return guest.Text(413, err.Error()+"\n")
		} else if err != nil {
			return guest.Text(400, err.Error()+"\n")
		}
		return guest.Text(200, "entry "+strconv.FormatInt(res.LastInsertID, 10)+"\n")
	}
	rows, err := guest.SQL.Query("SELECT who, note FROM signed WHERE who LIKE ? ORDER BY id", who+"%")
	if err != nil {
		return guest.Text(400, err.Error()+"\n")
	}
	var b []byte
	for _, row := range rows.Rows {
		b = append(b, row[0].(string)+": "+row[1].(string)+"\n"...)
	}
	return guest.Text(200, string(b))
}

func main() {}
