"""The working view: the messages the model sees, and the marks that say what each one is.

``markers`` names every mark this package puts on a message and the predicates that read them.
"""
