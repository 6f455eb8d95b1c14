"""Operations on a whole thread across the history store, the usage ledger and long-term memory:
export, import and delete."""
