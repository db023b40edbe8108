//! `wakeful web` (todo)
