"""The words of speculative_replay, the one app not moved to its folder yet (its engineer is
changing it): its catalog (``MSG``) and tables. Every other word is in the one message catalog of
apps and plots, ``words/`` (docs/apps.md); these move there too, and this package goes."""
