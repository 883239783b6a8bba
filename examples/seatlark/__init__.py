"""Seatlark, a small concert-ticket shop that runs its slow work on rota."""
