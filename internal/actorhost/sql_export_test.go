package actorhost

// The SQL connections opened so far, and those open now.
var SQLOpens, SQLLive = &sqlOpens, &sqlLive
