"""The record pack: errkb loads every record file under this folder."""
