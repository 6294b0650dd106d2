"""Every word each app shows, in English and 中文: one catalog of whole messages per app
(``MSG``), plus ``common.COMMON`` (the messages every app shares)."""
